# Loaded by the moto_server the tests start (awstest puts this directory on
# its PYTHONPATH). Two costs of moto's server that are not emulation are
# taken away; what moto answers is unchanged:
#
# - its dispatcher lists moto's package directory on disk (a listdir and an
#   isdir per service) on every request to decide which service a request
#   is for: a quarter of moto's CPU in our suites. The directory does not
#   change while it runs, so the list is read once.
# - werkzeug writes a log line per request to a pipe nobody reads but a
#   failing test (moto's errors still reach it).
import logging

try:
    from moto import backends as _backends
except ImportError:  # not moto's interpreter: nothing to do
    pass
else:
    _modules = tuple(_backends.list_of_moto_modules())
    _backends.list_of_moto_modules = lambda: _modules

logging.getLogger("werkzeug").setLevel(logging.WARNING)
