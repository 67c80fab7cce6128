"""Small models the Python tests compile (random weights, built from code)."""

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, width=32, depth=3, classes=10):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.GELU()]
        self.body = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return torch.log_softmax(self.head(self.norm(self.body(x) + x)), dim=-1)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean(dim=(2, 3)))


def encoder_layer():
    return nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                      batch_first=True)


def assert_close(actual, expected, atol=1e-5, rtol=1e-4):
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
