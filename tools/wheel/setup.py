"""The onnxforge wheel around prebuilt files: tools/package.sh copies the Python package from
build/python/onnxforge (the pure-Python layer and the _onnxforge extension, which links the engine
statically) and the native onnxforge program into onnxforge/bin/ (what `zoo run` starts for its
steps) next to this file, then builds with `python3 -m build --wheel --no-isolation`."""
import os

from setuptools import setup
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel


class BinaryDistribution(Distribution):
    """The package holds a CPython extension: the wheel is tagged for this interpreter and platform."""

    def has_ext_modules(self):
        return True


class Wheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        python, abi, _ = super().get_tag()
        return python, abi, "linux_x86_64"


setup(
    version=os.environ["ONNXFORGE_VERSION"],
    packages=["onnxforge"],
    package_data={"onnxforge": ["*.so", "*.pyi", "py.typed", "bin/onnxforge"]},
    distclass=BinaryDistribution,
    cmdclass={"bdist_wheel": Wheel},
    zip_safe=False,
)
