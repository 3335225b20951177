"""ResNet-50 (He et al., 2016, arXiv:1512.03385) as a tracekit workload file, in pure torch.

A workload file is a Python file of functions ``(batch, dtype, device) -> (nn.Module,
tuple of input tensors)``. This one runs with

    make trace MODEL=resnet50 MODE=default          # found by name: it is in workloads/
    tracekit trace --model workloads/resnet50.py:resnet50 --mode reduce-overhead --batch 64

The ``@workload`` decorator is optional; it gives the default batch, a description
and the submodules ``--mode surgical`` compiles. The architecture is torchvision's
``resnet50`` (bottleneck blocks [3, 4, 6, 3], stride on the 3x3 convolution, 1000
classes: 25,557,032 parameters); ``torchvision:resnet50`` builds torchvision's own.
"""

import torch
from torch import nn

from tracekit import workload


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        stages, cin = [], 64
        for i, (width, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(cin, width, 2 if b == 0 and i > 0 else 1))
                cin = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


@workload(batch=32, description="ResNet-50 (pure torch), 224x224 images, 1000 classes",
          compile_targets="layer4")
def resnet50(batch, dtype, device):
    model = ResNet50().to(device=device, dtype=dtype)
    return model, (torch.randn(batch, 3, 224, 224, device=device, dtype=dtype),)
