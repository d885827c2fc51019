"""Run records: what one LoadGen test leaves behind and how it is read.

The RunRecord and its schema (record.py), metadata.json written and read (metadata.py), LoadGen's logs read
(loadgen_log.py), why a run is INVALID (verdict.py, early_stopping.py), what a run computes (computation.py) and
the command that repeats it (reproduce.py). Submission, audit, report and tuning read runs through this package
alone; it imports nothing above the field catalogue, the rules and the config.
"""
