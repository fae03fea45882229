"""Time-series forecasting.

- Understanding the Implicit Biases of Design Choices for Time Series
  Foundation Models, arXiv 2510.19236: `tsfm_knobs` (a patch-transformer
  forecaster whose knobs are the patch size, the normalisation, continuous
  vs quantised inputs and the MSE / pinball / cross-entropy head; synthetic
  pre-training series; MASE and CRPS). Its real series need the
  `timeseries` extra.

Example:
    ```python
    import jax
    from iclrjax.timeseries import tsfm_knobs as tk

    cfg = tk.ForecasterConfig(context=64, horizon=16, patch=8, loss='pinball')
    x = tk.training_batch(jax.random.PRNGKey(0), 8, cfg.context + cfg.horizon,
                          cfg.horizon, tk.SeriesConfig())
    context, future = x[:, :cfg.context], x[:, cfg.context:]
    model = tk.PatchForecaster(cfg)
    params = model.init(jax.random.PRNGKey(1), context)
    out, (loc, scale) = model.apply(params, context)
    loss = tk.loss_fn(cfg, out, (future - loc) / scale)    # train on this
    forecast = tk.point_forecast(cfg, out) * scale + loc   # [8, 16]
    print(float(loss), tk.mase(future, forecast, context).mean())
    ```
"""

from iclrjax.timeseries import tsfm_knobs
from iclrjax.timeseries.tsfm_knobs import (ForecasterConfig, PatchForecaster,
                                           SeriesConfig, crps_quantiles,
                                           crps_samples, forecast_quantiles,
                                           gaussian_crps, jump_series,
                                           loss_fn, mase, normalise,
                                           pinball, point_forecast,
                                           sample_forecasts, sinusoids,
                                           stable_rank, synthetic_series,
                                           tokenise, training_batch)

__all__ = [
    'tsfm_knobs',
    'ForecasterConfig', 'PatchForecaster', 'loss_fn', 'point_forecast',
    'forecast_quantiles', 'sample_forecasts', 'normalise', 'tokenise',
    'pinball',
    'SeriesConfig', 'training_batch', 'synthetic_series', 'sinusoids',
    'jump_series',
    'mase', 'crps_quantiles', 'crps_samples', 'gaussian_crps', 'stable_rank',
]
