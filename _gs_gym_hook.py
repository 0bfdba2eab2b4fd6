"""Registers GenesisMultiGPU-v0 as soon as ``gymnasium`` is imported; loaded by ``gs_gym_autoregister.pth``.

Kept tiny and dependency-free: it runs at every interpreter start and imports nothing until gymnasium is imported.
"""

import importlib.abc
import sys

_ENV_ID = "GenesisMultiGPU-v0"
_VECTOR_ENTRY_POINT = "gs_gym.registration:make_vector_env"
_ENTRY_POINT = "gs_gym.registration:refuse_single_env"  # gym.make: raises, naming gym.make_vec


def _register(module):
    if _ENV_ID not in module.envs.registry:
        module.envs.registration.register(
            id=_ENV_ID, entry_point=_ENTRY_POINT, vector_entry_point=_VECTOR_ENTRY_POINT
        )


class _GymnasiumImportHook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_register(module):
            exec_module(module)
            try:
                _register(module)
            except Exception:  # never break `import gymnasium`; `import gs_gym` registers too
                pass

        spec.loader.exec_module = exec_and_register
        return spec


def install():
    if "gymnasium" in sys.modules:
        try:
            _register(sys.modules["gymnasium"])
        except Exception:
            pass
    elif not any(isinstance(f, _GymnasiumImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _GymnasiumImportHook())
