"""The shapes warm-up: split and merge heads four ways, and which operations return a view."""
