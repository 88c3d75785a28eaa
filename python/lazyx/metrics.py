"""Counters and metrics under PyTorch/XLA's names (torch_xla.debug.metrics).

Fallback ops are counted as ``aten::<op>``; ``InputOutputAliasCount`` records one sample per
compiled program, the number of donated parameters.
"""
from . import _C


def counter_names():
    return list(_C.metrics_counter_names())


def counter_value(name):
    """The counter's value, or None if it was never incremented."""
    return _C.metrics_counter_value(name)


def metric_names():
    return list(_C.metrics_metric_names())


def metric_data(name):
    """(total_samples, accumulator, samples) or None, as torch_xla does."""
    return _C.metrics_metric_data(name)


def metrics_report():
    return _C.metrics_report()


def short_metrics_report():
    return _C.metrics_report()


def clear_all():
    _C.metrics_clear_all()


def clear_counters():
    _C.metrics_clear_counters()


def clear_metrics():
    _C.metrics_clear_metrics()


def fallback_counters():
    """{op: count} for the ops that ran on CPU through the fallback."""
    return {n: _C.metrics_counter_value(n) for n in _C.metrics_counter_names() if n.startswith("aten::")}
