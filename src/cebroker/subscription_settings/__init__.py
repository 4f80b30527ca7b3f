"""A subscription's settings as typed values: its ``config`` (:mod:`.delivery`) and the
``protocolsettings`` the broker itself reads (:mod:`.protocols`)."""
