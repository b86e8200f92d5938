"""The capstone's Keras twin (17_capstone): the same CNN trained with ``model.fit``, timed the same way."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gpucourse._validate import non_negative_int, one_of, positive_int, positive_number
from gpucourse.capstone.datasets import ImageData
from gpucourse.capstone.models import import_keras, keras_small_cnn


@dataclass
class KerasResult:
    """A Keras training run: test accuracy, training seconds, throughput."""

    accuracy: float
    train_seconds: float
    images_per_s: float
    epochs: int
    policy: str
    model: object = field(default=None, repr=False)


def train_keras(data: ImageData, epochs: int = 3, batch_size: int = 128, lr: float = 3e-3,
                precision: str = "float32", verbose: int = 2) -> KerasResult:
    """Train :func:`keras_small_cnn` on ``data`` with ``model.fit`` (TensorFlow places it on a GPU if there is one)."""
    if not isinstance(data, ImageData):
        raise TypeError(f"data must be an ImageData (from load_data), got {type(data).__name__}")
    epochs, batch_size = positive_int("epochs", epochs), positive_int("batch_size", batch_size)
    lr = positive_number("lr", lr)
    one_of("precision", precision, ("float32", "mixed"))
    verbose = non_negative_int("verbose", verbose)
    keras = import_keras()
    previous = keras.mixed_precision.global_policy().name
    if precision == "mixed":
        import tensorflow as tf  # already imported, quietly, by import_keras

        has_gpu = bool(tf.config.list_physical_devices("GPU"))
        keras.mixed_precision.set_global_policy("mixed_float16" if has_gpu else "mixed_bfloat16")
    try:
        keras.utils.set_random_seed(0)
        model = keras_small_cnn(data.image_size, num_classes=data.num_classes, in_channels=data.channels)
        model.compile(optimizer=keras.optimizers.Adam(lr),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        x_train, x_test = data.train_x.transpose(0, 2, 3, 1), data.test_x.transpose(0, 2, 3, 1)
        model.fit(x_train[:batch_size], data.train_y[:batch_size], epochs=1, batch_size=batch_size, verbose=0)
        start = time.perf_counter()  # after one warm-up batch: graph tracing is not training
        model.fit(x_train, data.train_y, epochs=epochs, batch_size=batch_size, verbose=verbose)
        seconds = time.perf_counter() - start  # fit returns after its last step has finished: synchronised
        _, accuracy = model.evaluate(x_test, data.test_y, batch_size=1024, verbose=0)
        policy = keras.mixed_precision.global_policy().name
    finally:
        keras.mixed_precision.set_global_policy(previous)
    return KerasResult(float(accuracy), seconds, epochs * len(data.train_y) / seconds, epochs, policy, model)
