# Loaded by the moto_server the tests start (awstest puts this directory on
# its PYTHONPATH). Three costs of moto's server that are not emulation are
# taken away; what moto answers is unchanged:
#
# - its dispatcher lists moto's package directory on disk (a listdir and an
#   isdir per service) on every request to decide which service a request
#   is for. The directory does not change while it runs: read it once.
# - werkzeug writes a log line per request to a pipe nobody reads but a
#   failing test (moto's errors still reach it).
# - EC2 looks up one resource's tags by matching a regular expression
#   against the id of every tagged resource it holds, for every instance
#   it describes: quadratic in the instances a suite launched, more than
#   half of moto's CPU. A lookup by one literal id reads that id's tags
#   directly, in the same order and shape; any other filter goes the
#   original way.
import importlib.util
import logging
import sys

try:
    from moto import backends as _backends
except ImportError:  # not moto's interpreter: nothing to do
    _backends = None

if _backends is not None:
    _modules = tuple(_backends.list_of_moto_modules())
    _backends.list_of_moto_modules = lambda: _modules

logging.getLogger("werkzeug").setLevel(logging.WARNING)


def _patch_tags(module):
    original = module.TagBackend.describe_tags

    def describe_tags(self, filters=None):
        ids = filters.get("resource-id") if filters else None
        if filters and len(filters) == 1 and ids and len(ids) == 1 and not any(c in ids[0] for c in "*?[]\\"):
            rid = ids[0]
            kind = module.EC2_PREFIX_TO_RESOURCE.get(module.get_prefix(rid), "")
            return [{"resource_id": rid, "key": k, "value": v, "resource_type": kind}
                    for k, v in dict(self.tags.get(rid, {})).items()]
        return original(self, filters)

    module.TagBackend.describe_tags = describe_tags


class _PatchOnImport:
    """Patches moto's EC2 tags module when moto first imports it (importing
    it here would cost every moto a second at start, EC2 or not)."""

    def find_spec(self, name, path=None, target=None):
        if name != "moto.ec2.models.tags":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def patched(module):
            exec_module(module)
            _patch_tags(module)

        spec.loader.exec_module = patched
        return spec


if _backends is not None:
    sys.meta_path.insert(0, _PatchOnImport())
