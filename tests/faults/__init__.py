"""The fault suite: real server processes killed, fuzzed, and behind links that lose answers."""
