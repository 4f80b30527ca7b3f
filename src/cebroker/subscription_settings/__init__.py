"""A subscription's settings as typed values: its ``config`` (:mod:`.delivery`)."""
