"""The native harness core (native/ in the repository): LoadGen built from its sdist with the toolkit's C++ SUT."""
