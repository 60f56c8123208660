"""Installs the DataLoader hooks when torch's DataLoader module is imported, without importing
torch (or ctypes, or the hooks) at interpreter start-up.

`arm()` puts a finder at the front of sys.meta_path that answers for exactly one module name,
`torch.utils.data.dataloader`: it asks the finders behind it for the real spec and wraps the
loader's exec_module so that, right after the module has executed, `stallscope.hooks.install()`
runs. The finder then leaves sys.meta_path. If the module is already imported, the hooks are
installed at once. Every other import pays one string comparison.
"""

import sys

TARGET = "torch.utils.data.dataloader"


def _warn(what: str, e: BaseException) -> None:
    try:
        sys.stderr.write(f"stallscope: {what} ({type(e).__name__}: {e}); training goes on unrecorded\n")
    except Exception:
        pass


def _install_hooks() -> None:
    try:
        from stallscope import hooks

        hooks.install()
    except Exception as e:  # never let our failure reach the user's import
        _warn("cannot install the DataLoader hooks", e)


class _DataLoaderImportFinder:
    """A meta path finder for TARGET only (see the module docstring)."""

    def find_spec(self, name, path=None, target=None):
        if name != TARGET:
            return None
        spec = None
        try:
            self.disarm()
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec  # let the import system carry on as it would without us
            loader = spec.loader
            orig_exec = loader.exec_module

            def exec_module(module):
                try:
                    orig_exec(module)
                finally:
                    # Restore the loader as it was (the wrapper was an instance attribute).
                    try:
                        del loader.exec_module
                    except Exception:
                        pass
                _install_hooks()  # only reached when the module executed without error

            loader.exec_module = exec_module
            # Our exec_module frame would show in the traceback of an error raised while the
            # DataLoader module executes; the excepthook removes it. Installed here, not at start-up,
            # so that programs that never import torch keep their hooks untouched.
            from stallscope import _tb

            _tb.install_excepthooks()
        except Exception as e:
            _warn("cannot watch for the DataLoader import", e)
        return spec

    @staticmethod
    def disarm() -> None:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _DataLoaderImportFinder)]

    # Old-style finder API some tools call on meta path entries.
    def invalidate_caches(self):
        pass


def arm() -> None:
    """Installs the hooks now if the DataLoader module is loaded, else when it gets imported."""
    if TARGET in sys.modules:
        _install_hooks()
        return
    if not any(isinstance(f, _DataLoaderImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _DataLoaderImportFinder())
