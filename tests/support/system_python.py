"""For a test that draws with matplotlib: a python3 without it (a pyenv one first on PATH)
hands the test over to the system python3, once, as scripts/fabric_plots.py does itself.
Meson runs the tests with the system python already; this is for running one by hand."""
import os
import sys


def use_python_with_matplotlib(test_file):
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    flag = "SPRAYNET_TEST_REEXEC"
    if os.environ.get(flag) != "1" and os.path.exists("/usr/bin/python3") \
            and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.environ[flag] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(test_file)] + sys.argv[1:])
    raise ImportError("matplotlib: not in this python3 nor in /usr/bin/python3")
