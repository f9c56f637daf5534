"""ditto: the Python layer over the C++ engine (built into _ditto by CMake)."""
from ._ditto import *  # noqa: F401,F403
from ._ditto import Error, Model, Session  # noqa: F401
