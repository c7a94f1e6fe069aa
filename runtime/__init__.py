"""vtakit.runtime: the driver that turns operations into VTA instruction streams."""
