"""The generic LoadGen harness: settings, QSL, SUT, child process per test, logs and metadata."""
