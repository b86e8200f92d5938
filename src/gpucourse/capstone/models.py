"""The capstone's model (17_capstone): one small CNN in PyTorch and its Keras twin, its parameters and FLOPs."""

from __future__ import annotations

import numpy as np

from gpucourse._validate import positive_int


def import_keras():
    """Import Keras through gpucourse.import_tensorflow (quiet start-up, GPU memory growth on) and return it."""
    from gpucourse import import_tensorflow

    import_tensorflow()
    import keras

    return keras


def _channels(channels: object) -> tuple[int, int]:
    """Validate a (first, second) pair of convolution widths."""
    if not isinstance(channels, (tuple, list)) or len(channels) != 2:
        raise TypeError(f"channels must be a pair of ints such as (16, 32), got {channels!r}")
    return positive_int("channels[0]", channels[0]), positive_int("channels[1]", channels[1])


def _image_size(image_size: object) -> int:
    """Validate an image size: an int >= 4 (two 2x2 poolings must leave at least one pixel)."""
    size = positive_int("image_size", image_size)
    if size < 4:
        raise ValueError(f"image_size must be >= 4 (the CNN pools twice by 2), got {size}")
    return size


def small_cnn(image_size: int = 28, channels: tuple[int, int] = (16, 32), num_classes: int = 10,
              in_channels: int = 1):
    """The course's CNN (torch): two 3x3 conv + ReLU + 2x2 max-pool blocks, then one linear layer.

    ``in_channels`` is the images' colour channels: 1 for grey images, 3 for colour ones.
    """
    import torch.nn as nn

    size, (c1, c2) = _image_size(image_size), _channels(channels)
    num_classes = positive_int("num_classes", num_classes)
    in_channels = positive_int("in_channels", in_channels)
    return nn.Sequential(
        nn.Conv2d(in_channels, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * (size // 4) ** 2, num_classes))


def keras_small_cnn(image_size: int = 28, channels: tuple[int, int] = (16, 32), num_classes: int = 10,
                    in_channels: int = 1):
    """The same CNN in Keras (channels-last input of shape (H, W, in_channels)); same layers, same parameter count."""
    keras = import_keras()
    size, (c1, c2) = _image_size(image_size), _channels(channels)
    num_classes = positive_int("num_classes", num_classes)
    in_channels = positive_int("in_channels", in_channels)
    layers = keras.layers
    return keras.Sequential([
        keras.Input((size, size, in_channels)),
        layers.Conv2D(c1, 3, padding="same", activation="relu"), layers.MaxPooling2D(2),
        layers.Conv2D(c2, 3, padding="same", activation="relu"), layers.MaxPooling2D(2),
        layers.Flatten(), layers.Dense(num_classes, dtype="float32")], name="small_cnn")


def count_parameters(model) -> int:
    """Trainable parameters of a torch module or a Keras model."""
    if hasattr(model, "parameters") and callable(model.parameters):
        return int(sum(p.numel() for p in model.parameters() if p.requires_grad))
    if hasattr(model, "trainable_weights"):
        return int(sum(int(np.prod(w.shape)) for w in model.trainable_weights))
    raise TypeError(f"model must be a torch.nn.Module or a Keras model, got {type(model).__name__}")


def training_flops_per_image(image_size: int = 28, channels: tuple[int, int] = (16, 32), num_classes: int = 10,
                             in_channels: int = 1) -> int:
    """FLOPs to train :func:`small_cnn` on one image: 3 x the forward pass's convolutions and linear layer."""
    size, (c1, c2) = _image_size(image_size), _channels(channels)
    num_classes = positive_int("num_classes", num_classes)
    in_channels = positive_int("in_channels", in_channels)
    half = size // 2
    forward = (2 * size * size * c1 * in_channels * 9  # conv1 on size x size
               + 2 * half * half * c2 * c1 * 9  # conv2 on size/2 x size/2
               + 2 * c2 * (size // 4) ** 2 * num_classes)  # linear
    return 3 * forward  # backward: gradients of the inputs and of the weights, each about one forward pass
