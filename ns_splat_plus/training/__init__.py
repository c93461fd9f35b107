"""Training: the trainer, its loop and step, pipeline, datamanager, optimizer update, warmup, checkpoints.

Entry points: :class:`~ns_splat_plus.training.trainer.SplatPlusTrainer` (and its config),
:func:`~ns_splat_plus.training.step.run_training_step` (the one step), :func:`~ns_splat_plus.training.loop.train_loop`.
Modules import lazily from here: ``from ns_splat_plus.training.trainer import SplatPlusTrainerConfig``.
"""
