"""What the controller and the TensorFlow task share, importing no TensorFlow.

Environment variable names (``env``), the job settings every task gets
(``runconfig``), the job policy both sides read (``policy``), progress
events (``events``), exit codes (``exitcodes``) and the checkpoint dir
layout (``checkpoint_layout``). Imports only ``launcher.spec`` below it.
"""
