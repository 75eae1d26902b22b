"""Offline stand-in for the get-pip.py that ansible-test downloads from ci-files.testing.ansible.com.

ansible-test creates each sanity test's virtual environment without pip and bootstraps pip by running
~/.ansible/test/cache/get_pip_<version>.py with the interpreter of that environment, passing pip's
options, the requirement (for example ``pip==25.2``) and ``--no-setuptools --no-wheel``. When that file
exists it is used instead of the download (ansible-test documents this for machines behind a proxy).
scripts/run-tests.sh installs this file there when no real get-pip is present.

This stand-in installs the pip wheel bundled with the Python standard library (ensurepip), then lets that
pip install the requested version from the package index, as get-pip.py would.
"""
# kubevirt_ops.rebalance get-pip stand-in (marker used by scripts/run-tests.sh; keep this line)
from __future__ import annotations

import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = {'--no-setuptools', '--no-wheel'}


def main() -> int:
    """Bootstrap pip from ensurepip, then install what ansible-test asked for."""
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    # ensurepip ignores pip's configuration by changing os.environ (PIP_CONFIG_FILE=/dev/null, no PIP_*
    # variables); the real install must see the configuration (index, certificates) again.
    environment = dict(os.environ)
    ensurepip.bootstrap(upgrade=True)
    command = [sys.executable, '-m', 'pip', 'install', '--upgrade', '--force-reinstall'] + args
    return subprocess.call(command, env=environment)


if __name__ == '__main__':
    sys.exit(main())
