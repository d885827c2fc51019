"""Finding the peak: searches over one LoadGen setting (search.py, pure), the LoadGen runs they drive
(trials.py) and the assignment they leave in a config class (config_edit.py)."""
