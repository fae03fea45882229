"""Time-series forecasting methods (time-series foundation-model knobs, ...)."""
