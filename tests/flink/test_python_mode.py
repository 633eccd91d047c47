"""Choosing PyFlink's Python execution mode for a job, and state laid out alike in both modes."""

from __future__ import annotations

import os
import sys
import sysconfig

import pytest
from pyflink.fn_execution.coder_impl_slow import BigIntCoderImpl, CharCoderImpl
from pyflink.fn_execution.stream_slow import OutputStream
from pyflink.util.java_utils import get_j_env_configuration

from connector.errors import InvalidArgumentError
from flink_adapter import FlinkTidemarkReader
from flink_adapter.coordinator_state import (
    decode_long,
    decode_string,
    encode_long,
    encode_string,
)
from flink_adapter.python_mode import (
    EXECUTABLE_KEY,
    MODE_KEY,
    PATH_KEY,
    PROCESS,
    THREAD,
    configure_job,
    local_python_path,
)
from tests.flink.conftest import environment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(env):
    config = get_j_env_configuration(env._j_stream_execution_environment)
    return {key: config.getString(key, None) for key in (MODE_KEY, EXECUTABLE_KEY, PATH_KEY)}


def test_a_job_without_a_mode_is_left_in_pyflinks_default_process_mode():
    env = environment()
    assert configure_job(env, None) == PROCESS
    assert _config(env) == {MODE_KEY: None, EXECUTABLE_KEY: None, PATH_KEY: None}


def test_a_local_job_asked_for_thread_mode_gets_this_interpreter_and_its_path():
    env = environment()
    assert configure_job(env, THREAD) == THREAD
    config = _config(env)
    assert config[MODE_KEY] == THREAD
    assert config[EXECUTABLE_KEY] == sys.executable
    path = config[PATH_KEY].split(os.pathsep)
    assert sysconfig.get_paths()["purelib"] in path, "the environment's site-packages"
    assert ROOT in path, "the checkout an editable install imports from"


def test_a_job_set_to_thread_mode_by_itself_gets_the_interpreter_and_path_too():
    env = environment(THREAD)
    assert configure_job(env, None) == THREAD
    assert _config(env)[EXECUTABLE_KEY] == sys.executable


def test_the_jobs_own_mode_is_kept_and_an_explicit_one_wins():
    env = environment(PROCESS)
    assert configure_job(env, None) == PROCESS
    assert _config(env)[PATH_KEY] is None, "process mode needs no path"
    assert configure_job(env, THREAD) == THREAD
    assert _config(env)[MODE_KEY] == THREAD


def test_settings_the_job_made_are_not_overwritten():
    env = environment(**{PATH_KEY: "/opt/mine"})
    configure_job(env, THREAD)
    assert _config(env)[PATH_KEY] == "/opt/mine"


def test_the_path_lists_each_folder_once():
    path = local_python_path().split(os.pathsep)
    assert len(path) == len(set(path))


@pytest.mark.parametrize("mode", ["threads", "", 1])
def test_a_bad_mode_is_refused_at_build_naming_the_method(mode):
    builder = FlinkTidemarkReader.builder().with_store("tidemark://h:1").for_stream("a/b")
    with pytest.raises(InvalidArgumentError, match=r"^with_python_execution_mode: expected"):
        builder.with_python_execution_mode(mode).build()


@pytest.mark.parametrize("text", ["", "{}", '{"ü": "ß€"}', "x" * 70_000])
def test_a_string_is_kept_as_process_mode_keeps_it(text):
    stream = OutputStream()
    CharCoderImpl().encode_to_stream(text, stream)
    assert encode_string(text) == stream.get()
    assert decode_string(encode_string(text)) == text


@pytest.mark.parametrize("number", [0, 8, -1, 1_795_600_152_847, 2**63 - 1, -(2**63)])
def test_a_long_is_kept_as_process_mode_keeps_it(number):
    stream = OutputStream()
    BigIntCoderImpl().encode_to_stream(number, stream)
    assert encode_long(number) == stream.get()
    assert decode_long(encode_long(number)) == number
