"""Dynamic Gated Neuron vs LIF / PLIF / ALIF spiking nets (configs/dgn_snn.py)."""

from iclrjax.core import launch
from iclrjax.snn import dgn

EXPERIMENT = launch.Experiment('dgn_snn', dgn.run, schema=dgn.config_schema(),
                               check_fn=dgn.check_config,
                               preflight=dgn.preflight)

if __name__ == '__main__':
  EXPERIMENT.main()
