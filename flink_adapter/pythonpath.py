"""Prints the ``python.pythonpath`` thread mode needs on a TaskManager running this environment.

    flink run ... -pyexec "$PYTHON" -pypath "$("$PYTHON" -m flink_adapter.pythonpath)" ...

Run it with the interpreter the TaskManagers run (``python.executable``),
on a machine laid out like theirs: it prints that interpreter's
site-packages, the folders this package and the reader core are imported
from (an editable install's checkout), and the rest of its path
(:func:`flink_adapter.python_mode.local_python_path`).
"""

from flink_adapter.python_mode import local_python_path

if __name__ == "__main__":
    print(local_python_path())
