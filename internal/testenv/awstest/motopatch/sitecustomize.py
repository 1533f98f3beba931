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
# - EC2 turns every filter value into a regular expression (fnmatch's
#   translate) once per resource it filters; the translation of one value
#   never changes, so it is kept.
# - The serializer of moto's answers asks, for every member of every shape
#   it writes, which attribute names the Python object may hold it under
#   (six alias rules, through a context object and the member's dotted
#   path), and tries every answer transformer's key path against the
#   member's: half the CPU of a DescribeInstances or a GetItem. The names
#   depend only on the object's class, the member and its shape (the rules
#   read nothing else), so they are kept on the shape per class and member;
#   a transformer's key path can only match a member of its last name, so
#   only those are tried, and the path is built only then. An object or
#   picker outside what the rules read (its own Meta, other alias rules)
#   goes the original way.
#
# A patch whose target is not as expected leaves moto as it is. What moto
# answers is unchanged (awstest's TestThePatchedMotoAnswersByteForByteWhatMotoDoes).
import functools
import importlib.util
import logging
import os
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


def _patch_ec2_utils(module):
    translate = getattr(module, "simple_aws_filter_to_re", None)
    if translate is None:
        return
    cached = functools.lru_cache(maxsize=4096)(translate)

    def simple_aws_filter_to_re(filter_string):
        try:
            return cached(filter_string)
        except TypeError:  # not hashable: as moto would
            return translate(filter_string)

    module.simple_aws_filter_to_re = simple_aws_filter_to_re


def _patch_serialize(module):
    serializer = getattr(module, "ResponseSerializer", None)
    picker = getattr(module, "AttributePicker", None)
    xformed = getattr(module, "XFormedAttributePicker", None)
    defaults = getattr(module, "DEFAULT_ALIAS_PROVIDERS", None)
    context_of = getattr(module, "AttributePickerContext", None)
    value_of, missing = getattr(module, "get_value", None), getattr(module, "MISSING", None)
    if None in (serializer, picker, xformed, defaults, context_of, value_of, missing) or not hasattr(picker, "get_possible_keys") or not hasattr(serializer, "get_value"):
        return
    original = serializer.get_value
    candidates = {}

    def transformed_by(transformers, key):
        # The key paths that can end a member's path: a path with a dot
        # only when its last name is the member's, one without only when
        # it ends the member's name. In the transformers' order, as moto
        # tries them; read again when moto adds one.
        names = tuple(transformers)
        found = candidates.get((names, key))
        if found is None:
            found = candidates[(names, key)] = tuple(tp for tp in names if (key == tp.rsplit(".", 1)[-1] if "." in tp else key.endswith(tp)))
        return found

    def get_value_fast(self, value, key, shape):
        p = self._value_picker
        store = getattr(shape, "__dict__", None)
        if (type(p) not in (picker, xformed) or p.alias_providers is not defaults or store is None
                or not isinstance(key, str) or not key or "." in key or "Meta" in getattr(value, "__dict__", ())):
            return original(self, value, key, shape)
        cache = store.get("_ghr_keys")
        if cache is None:
            cache = store["_ghr_keys"] = {}
        k = (type(value), key, type(p))
        keys = cache.get(k)
        if keys is None:
            context = context_of(obj=value, key=key, shape=shape, operation_model=self.operation_model,
                                 service_model=self.operation_model.service_model, key_path=".".join(self.path))
            keys = cache[k] = tuple(p.get_possible_keys(context))
        result = None
        for possible_key in keys:
            found = value_of(value, possible_key, missing)
            if found is not missing:
                result = found
                break
        transformers = p.response_transformers
        if transformers:
            paths = transformed_by(transformers, key)
            if paths:
                key_path = ".".join(self.path) + "." + key
                for tp in paths:
                    if key_path.endswith(tp):
                        return transformers[tp](result)
        return result

    serializer.get_value = get_value_fast


_PATCHES = {
    "moto.ec2.models.tags": lambda module: _patch_tags(module),
    "moto.ec2.utils": _patch_ec2_utils,
    "moto.core.serialize": _patch_serialize,
}


class _PatchOnImport:
    """Patches moto's modules when moto first imports them (importing them
    here would cost every moto a second at start, EC2 or not)."""

    def find_spec(self, name, path=None, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
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
            patch(module)

        spec.loader.exec_module = patched
        return spec


# check.py imports this file to apply the patches itself, after it read
# what moto answers without them.
if _backends is not None and not os.environ.get("GHR_MOTOPATCH_CHECK"):
    # Importing moto's backends list above imported some of them already.
    for _name, _patch in _PATCHES.items():
        if _name in sys.modules:
            _patch(sys.modules[_name])
    _PATCHES = {n: p for n, p in _PATCHES.items() if n not in sys.modules}
    sys.meta_path.insert(0, _PatchOnImport())
