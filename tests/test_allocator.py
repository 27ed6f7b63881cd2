"""glibc's allocator keeps freed memory in the process (harness/models/allocator.py): both thresholds are accepted."""

from __future__ import annotations

import platform

import pytest

from harness.models.allocator import keep_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_both_thresholds():
    assert keep_freed_memory() is True
