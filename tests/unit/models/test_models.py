"""Tests for fedlib.models: shapes, parameter counts against published numbers, the
functional_call contract the engine relies on, and the one-line errors."""

import copy

import pytest
import torch
from torch.func import functional_call, grad

from fedlib.errors import FedlibError
from fedlib.models import MODELS, FedModel, build_model, count_parameters, replace_classifier
from fedlib.models.mobilenet import MOBILENETV2_STAGES

CONTRACT_MODELS = ("mlp", "lenet5", "simple_cnn", "cnn2", "convnet_s", "vgg9", "resnet8", "resnet32",
                   "resnet56", "resnet18", "resnet18_imagenet", "resnet50", "mobilenetv2",
                   "alexnet", "lenet5_classic")


# Parameter arithmetic, written independently of the model code.
def conv(cin: int, cout: int, k: int, bias: bool = True, groups: int = 1) -> int:
    return cin // groups * cout * k * k + (cout if bias else 0)


def fc(fan_in: int, fan_out: int) -> int:
    return fan_in * fan_out + fan_out


def bn(channels: int) -> int:
    return 2 * channels


def cifar_resnet_count(n: int, classes: int, projection: bool = False) -> int:
    """Stem + 3 stages of n basic blocks (16/32/64) + FC; option A shortcuts are free."""
    total = conv(3, 16, 3, bias=False) + bn(16)
    cin = 16
    for width in (16, 32, 64):
        for _ in range(n):
            total += conv(cin, width, 3, False) + bn(width) + conv(width, width, 3, False) + bn(width)
            if projection and cin != width:
                total += conv(cin, width, 1, False) + bn(width)
            cin = width
    return total + fc(64, classes)


def mobilenetv2_count(classes: int) -> int:
    total = conv(3, 32, 3, False) + bn(32)
    cin = 32
    for t, cout, blocks, first_stride in MOBILENETV2_STAGES:
        for b in range(blocks):
            hidden = t * cin
            total += conv(cin, hidden, 1, False) + bn(hidden)
            total += conv(hidden, hidden, 3, False, groups=hidden) + bn(hidden)
            total += conv(hidden, cout, 1, False) + bn(cout)
            stride = first_stride if b == 0 else 1
            if stride == 1 and cin != cout:
                total += conv(cin, cout, 1, False) + bn(cout)
            cin = cout
    return total + conv(320, 1280, 1, False) + bn(1280) + fc(1280, classes)


def test_model_names_match_the_contract():
    assert MODELS == CONTRACT_MODELS


@pytest.mark.parametrize("name", CONTRACT_MODELS)
def test_logits_and_features_shapes_on_cifar_sized_input(name):
    torch.manual_seed(0)
    model = build_model(name, num_classes=10).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        features, logits = model(x, return_features=True)
        plain_logits = model(x)
        # features are exactly the input of the last Linear
        from_features = model.classifier(features)
    assert isinstance(model, FedModel) and isinstance(model.classifier, torch.nn.Linear)
    assert logits.shape == (2, 10)
    assert features.shape == (2, model.feature_dim)
    assert torch.allclose(plain_logits, logits)
    assert torch.allclose(from_features, logits, atol=1e-5)
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize("name", CONTRACT_MODELS)
def test_grey_28x28_input_works_for_every_model(name):
    model = build_model(name, num_classes=7, in_channels=1, image_size=28).eval()
    with torch.no_grad():
        features, logits = model(torch.randn(2, 1, 28, 28), return_features=True)
    assert logits.shape == (2, 7)
    assert features.shape == (2, model.feature_dim)


PARAMETER_COUNTS = [
    # McMahan et al. 2017: 2NN with 200 units, "199,210 total parameters" on MNIST.
    ("mlp", dict(in_channels=1, image_size=28), 10,
     fc(784, 200) + fc(200, 200) + fc(200, 10), 199_210),
    # LeNet-5 (LeCun et al. 1998 layout): 61,706 for 10 classes, 32x32 grey input ...
    ("lenet5", dict(in_channels=1, image_size=32), 10,
     conv(1, 6, 5) + conv(6, 16, 5) + fc(400, 120) + fc(120, 84) + fc(84, 10), 61_706),
    # ... and the same network on 28x28 MNIST (first conv padded by 2).
    ("lenet5", dict(in_channels=1, image_size=28), 10, None, 61_706),
    # LeNet-5 with tanh and average pooling: no parameters added.
    ("lenet5_classic", dict(in_channels=1, image_size=28), 10, None, 61_706),
    # MOON's simple CNN (FedCSD's FEMNIST network): the same layers unpadded, FC reads 16x4x4 on 28x28 ...
    ("simple_cnn", dict(in_channels=1, image_size=28), 10,
     conv(1, 6, 5) + conv(6, 16, 5) + fc(256, 120) + fc(120, 84) + fc(84, 10), 44_426),
    # ... and MOON's CIFAR "simple-cnn" (16x5x5) on 32x32 colour images, LeNet-5 there.
    ("simple_cnn", dict(), 10, conv(3, 6, 5) + conv(6, 16, 5) + fc(400, 120) + fc(120, 84) + fc(84, 10), 62_006),
    # FedNTD/FedLMD 2-conv CNN on CIFAR-10.
    ("cnn2", dict(), 10,
     conv(3, 32, 5) + conv(32, 64, 5) + fc(64 * 8 * 8, 512) + fc(512, 10), 2_156_490),
    # McMahan et al. 2017 CNN on MNIST, "1,663,370 total parameters" (PKD's ConvNet-S).
    ("convnet_s", dict(in_channels=1, image_size=28), 10,
     conv(1, 32, 5) + conv(32, 64, 5) + fc(64 * 7 * 7, 512) + fc(512, 10), 1_663_370),
    # FedMA VGG-9 layer list (3x3 convs 32,64,128,128,256,256; FC 4096-512-512-10).
    ("vgg9", dict(), 10,
     conv(3, 32, 3) + conv(32, 64, 3) + conv(64, 128, 3) + conv(128, 128, 3)
     + conv(128, 256, 3) + conv(256, 256, 3) + fc(4096, 512) + fc(512, 512) + fc(512, 10),
     3_491_530),
    # He et al. 2016, Table 6 (CIFAR-10): ResNet-32 0.46M, ResNet-56 0.85M (option A).
    ("resnet32", dict(), 10, cifar_resnet_count(5, 10), 464_154),
    ("resnet56", dict(), 10, cifar_resnet_count(9, 10), 853_018),
    ("resnet8", dict(), 10, cifar_resnet_count(1, 10), 75_290),
    # The ~0.078M usually quoted for ResNet-8 is the projection-shortcut variant.
    ("resnet8", dict(shortcut="projection"), 10, cifar_resnet_count(1, 10, True), 78_042),
    # torchvision resnet18: 11,689,512 for 1000 classes (torchvision model docs).
    ("resnet18_imagenet", dict(), 1000, None, 11_689_512),
    ("resnet18_imagenet", dict(), 10, 11_689_512 - fc(512, 1000) + fc(512, 10), 11_181_642),
    # CIFAR ResNet-18: torchvision's minus its 7x7 stem, plus a 3x3 one, 10-way FC.
    ("resnet18", dict(), 10,
     11_689_512 - conv(3, 64, 7, False) + conv(3, 64, 3, False) - fc(512, 1000) + fc(512, 10),
     11_173_962),
    # torchvision resnet50: 25,557,032 for 1000 classes (torchvision model docs).
    ("resnet50", dict(image_size=224), 1000, None, 25_557_032),
    ("resnet50", dict(), 10,
     25_557_032 - conv(3, 64, 7, False) + conv(3, 64, 3, False) - fc(2048, 1000) + fc(2048, 10),
     23_520_842),
    # torchvision alexnet: 61,100,840 for 1000 classes (torchvision model docs).
    ("alexnet", dict(image_size=224), 1000, None, 61_100_840),
    ("alexnet", dict(), 10,
     61_100_840 - conv(3, 64, 11) + conv(3, 64, 3) - fc(4096, 1000) + fc(4096, 10), 57_023_306),
    # FedVLS MobileNetV2 (32x32 variant), counted layer by layer.
    ("mobilenetv2", dict(), 10, mobilenetv2_count(10), 2_296_922),
]


@pytest.mark.parametrize("name, kwargs, classes, arithmetic, published", PARAMETER_COUNTS)
def test_parameter_counts_match_published_and_arithmetic(name, kwargs, classes, arithmetic,
                                                         published):
    counted = count_parameters(build_model(name, classes, **kwargs))
    assert counted == published
    if arithmetic is not None:
        assert counted == arithmetic


def test_simple_cnn_is_lenet5_without_the_28x28_padding():
    grey = torch.randn(2, 1, 28, 28)
    simple, lenet = build_model("simple_cnn", 10, 1, 28), build_model("lenet5", 10, 1, 28)
    assert simple.body[0].padding == (0, 0) and lenet.body[0].padding == (2, 2)
    assert simple.body[7].in_features == 16 * 4 * 4 and lenet.body[7].in_features == 16 * 5 * 5
    assert simple(grey, return_features=True)[0].shape == (2, 84)
    torch.manual_seed(0)
    colour_simple = build_model("simple_cnn", 10, 3, 32)
    torch.manual_seed(0)
    colour_lenet = build_model("lenet5", 10, 3, 32)
    image = torch.randn(2, 3, 32, 32)
    assert torch.equal(colour_simple(image), colour_lenet(image))  # one network on 32x32 inputs


def test_published_cifar_resnet_sizes_within_rounding():
    # He et al. 2016 Table 6 prints sizes rounded to 0.01M.
    assert round(count_parameters(build_model("resnet32", 10)) / 1e6, 2) == 0.46
    assert round(count_parameters(build_model("resnet56", 10)) / 1e6, 2) == 0.85


def test_stems_follow_input_size():
    small = build_model("resnet50", 10, image_size=32).body
    large = build_model("resnet50", 10, image_size=224).body
    assert small.conv1.kernel_size == (3, 3) and isinstance(small.maxpool, torch.nn.Identity)
    assert large.conv1.kernel_size == (7, 7) and isinstance(large.maxpool, torch.nn.MaxPool2d)
    assert build_model("alexnet", 10, image_size=64).body[0].kernel_size == (11, 11)
    assert build_model("alexnet", 10, image_size=63).body[0].kernel_size == (3, 3)


@pytest.mark.parametrize("name", ["mlp", "cnn2", "resnet8", "mobilenetv2"])
def test_functional_call_with_other_parameters(name):
    torch.manual_seed(0)
    model = build_model(name, num_classes=5).eval()
    x = torch.randn(2, 3, 32, 32)
    state = {key: value * 1.5 if value.is_floating_point() else value
             for key, value in model.state_dict().items()}
    features, logits = functional_call(model, state, (x,), {"return_features": True})
    reference = copy.deepcopy(model)
    reference.load_state_dict(state)
    with torch.no_grad():
        ref_features, ref_logits = reference(x, return_features=True)
        own_logits = model(x)
    assert torch.allclose(features, ref_features, atol=1e-5)
    assert torch.allclose(logits, ref_logits, atol=1e-5)
    assert not torch.allclose(logits, own_logits)  # the passed parameters were really used


def test_functional_call_gradient_and_batchnorm_buffers_in_train_mode():
    torch.manual_seed(0)
    model = build_model("resnet8", num_classes=4).train()
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    buffers = {k: v.clone() for k, v in model.named_buffers()}
    x, labels = torch.randn(4, 3, 16, 16), torch.tensor([0, 1, 2, 3])
    own_mean = model.body[1].running_mean.clone()

    # torch.func needs the mutated BatchNorm buffers as explicit inputs, not captured.
    def loss(p, b):
        features, logits = functional_call(model, {**p, **b}, (x,), {"return_features": True})
        return torch.nn.functional.cross_entropy(logits, labels) + 0 * features.sum()

    grads = grad(loss)(params, buffers)
    assert set(grads) == set(params)
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert grads["classifier.weight"].abs().sum() > 0
    # BatchNorm updated the passed buffers, not the module's own.
    assert not torch.allclose(buffers["body.1.running_mean"], own_mean)
    assert torch.equal(model.body[1].running_mean, own_mean)


def test_same_seed_gives_same_weights():
    torch.manual_seed(3)
    first = build_model("resnet8", 10).state_dict()
    torch.manual_seed(3)
    second = build_model("resnet8", 10).state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_replace_classifier_keeps_body_and_changes_outputs():
    model = build_model("lenet5", 10, in_channels=1, image_size=28)
    body_weight = model.body[0].weight
    returned = replace_classifier(model, 3)
    assert returned is model and model.body[0].weight is body_weight
    assert model.classifier.out_features == 3 and model.feature_dim == 84
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 3)


def test_unknown_model_lists_valid_names():
    with pytest.raises(FedlibError) as error:
        build_model("resnet1000", 10)
    message = str(error.value)
    assert "\n" not in message and "resnet1000" in message
    assert all(name in message for name in CONTRACT_MODELS)


@pytest.mark.parametrize("name, kwargs", [
    ("lenet5", dict(image_size=8)),
    ("cnn2", dict(image_size=3)),
    ("vgg9", dict(image_size=7)),
    ("alexnet", dict(image_size=6)),
    ("alexnet", dict(image_size=32, cifar_stem=False)),
])
def test_too_small_inputs_raise_one_line_with_the_smallest_size(name, kwargs):
    with pytest.raises(FedlibError, match=r"use image_size >= \d+$") as error:
        build_model(name, 10, in_channels=1, **kwargs)
    smallest = int(str(error.value).rsplit(" ", 1)[1])
    model = build_model(name, 10, in_channels=1, **{**kwargs, "image_size": smallest}).eval()
    with torch.no_grad():
        assert model(torch.randn(2, 1, smallest, smallest)).shape == (2, 10)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(num_classes=0), "num_classes"),
    (dict(num_classes=10, in_channels=2.5), "in_channels"),
    (dict(num_classes=10, image_size=True), "image_size"),
    (dict(num_classes=10, dropout=0.3), "dropout"),
])
def test_bad_arguments_raise_fedlib_error(kwargs, fragment):
    with pytest.raises(FedlibError, match=fragment):
        build_model("cnn2", **kwargs)


def test_bad_shortcut_lists_choices():
    with pytest.raises(FedlibError, match="projection"):
        build_model("resnet32", 10, shortcut="conv")


@pytest.mark.parametrize("size, expected", [(7, (2, 1)), (6, (1, 1)), (12, (2, 2)), (13, (3, 2)), (3, None), (1, None)])
def test_uniform_window_is_the_adaptive_pool_as_equal_windows(size, expected):
    from fedlib.models.alexnet import uniform_window

    assert uniform_window(size, 6) == expected


@pytest.mark.parametrize("size, exact", [(7, True), (6, True), (12, True), (3, True), (1, True), (13, False)])
def test_alexnets_pool_equals_adaptive_pooling_forward_and_backward(size, exact):
    """Bit for bit where a window holds at most 2 x 2 values (AlexNet's own sizes) or the adaptive
    pool is kept; to float rounding for larger windows (another order of summation)."""
    from fedlib.models.alexnet import UniformAdaptiveAvgPool

    torch.manual_seed(0)
    x = torch.randn(4, 8, size, size, requires_grad=True)
    upstream = torch.randn(4, 8, 6, 6)
    ours, = torch.autograd.grad(out := UniformAdaptiveAvgPool(6)(x), x, upstream)
    theirs, = torch.autograd.grad(reference := torch.nn.functional.adaptive_avg_pool2d(x, 6), x, upstream)
    same = torch.equal if exact else lambda a, b: torch.allclose(a, b, rtol=0, atol=1e-6)
    assert same(out, reference) and same(ours, theirs)


def test_alexnet_at_32_pixels_pools_with_a_plain_average_pool():
    from fedlib.models.alexnet import UniformAdaptiveAvgPool

    pools = [m for m in build_model("alexnet", 10).modules() if "Adaptive" in type(m).__name__]
    assert [type(m) for m in pools] == [UniformAdaptiveAvgPool]


def test_the_classic_lenet5_is_lenet5_with_tanh_and_average_pooling():
    classic = build_model("lenet5_classic", num_classes=10, in_channels=1, image_size=28)
    modern = build_model("lenet5", num_classes=10, in_channels=1, image_size=28)
    kinds = lambda model: [type(m).__name__ for m in model.body]  # noqa: E731
    assert kinds(classic) == [k.replace("ReLU", "Tanh").replace("MaxPool2d", "AvgPool2d") for k in kinds(modern)]
    assert "Tanh" in kinds(classic) and "AvgPool2d" in kinds(classic)
    classic.load_state_dict(modern.state_dict())  # the same parameters, by name and shape
    x = torch.rand(2, 1, 28, 28)
    assert not torch.allclose(classic(x), modern(x)), "another network, not a renamed one"
