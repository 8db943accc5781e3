"""Recompute the FedVLS authors' MNIST partition (seed 1 at import of generate_mnist.py)."""
import os
import sys

import numpy as np
from sklearn.model_selection import train_test_split

RAW = os.path.join(os.environ.get("FEDLIB_DATA", "data"), "MNIST", "raw", "")


def labels(name):
    with open(RAW + name, "rb") as f:
        return np.frombuffer(f.read()[8:], dtype=np.uint8).astype(np.int64)


def authors_partition(alpha, num_clients=10, num_classes=10):
    np.random.seed(1)
    y = np.concatenate([labels("train-labels-idx1-ubyte"), labels("t10k-labels-idx1-ubyte")])
    index = np.arange(len(y))
    idx_train, idx_test, y_train, _ = train_test_split(index, y, train_size=0.75, shuffle=True)
    least = 64 / 0.25
    n = len(y_train)
    min_size, draws = 0, 0
    while min_size < least:
        draws += 1
        batches = [[] for _ in range(num_clients)]
        for k in range(num_classes):
            idx_k = np.where(y_train == k)[0]
            np.random.shuffle(idx_k)
            p = np.random.dirichlet(np.repeat(alpha, num_clients))
            p = np.array([q * (len(b) < n / num_clients) for q, b in zip(p, batches)])
            p = p / p.sum()
            cuts = (np.cumsum(p) * len(idx_k)).astype(int)[:-1]
            batches = [b + part.tolist() for b, part in zip(batches, np.split(idx_k, cuts))]
            min_size = min(len(b) for b in batches)
    counts = np.array([np.bincount(y_train[b], minlength=num_classes) for b in batches])
    return idx_train, idx_test, batches, counts, draws


if __name__ == "__main__":
    alpha = float(sys.argv[1])
    *_, counts, draws = authors_partition(alpha)
    print("alpha", alpha, "draws", draws)
    for k, row in enumerate(counts):
        print(k, row.tolist(), row.sum(), "vacant", int((row == 0).sum()))
