"""The harness child on a disk that is full from its first write on: a fault injected by the tests only, for machines
where no small file system can be mounted (tests/small_disk.py).

`python -m tests.disk_full_child <run_spec.json> [<watch pipe fd>]` behaves like `code.common.harness.child`, except
that writing user.conf, the first file the test writes after the space for its record was set aside, fails as a
write on a full disk does: OSError ENOSPC, without a file name.
"""
from __future__ import annotations

import errno
import os
import sys

from code.common.harness import child


def full_disk_write(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


if __name__ == "__main__":
    child.write_user_conf = full_disk_write
    sys.exit(child.main(sys.argv[1:]))
