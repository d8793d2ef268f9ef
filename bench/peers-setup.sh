#!/bin/bash
# peers-setup.sh: what the CNN peers need (bench/cnn_torch.py, bench/cnn_tf.py), kept out of
# scripts/deps.sh because only these benchmarks use it:
#   - PyTorch 1.13 from Debian (python3-torch; it does its GEMMs in the system OpenBLAS, the one
#     our side uses), installed with apt-get when /usr/bin/python3 cannot import it;
#   - a virtual environment, bench/.venv (git-ignored), made with --system-site-packages so that
#     Debian's torch stays importable in it, holding tensorflow-cpu from PyPI: TF_VERSION
#     (default 2.21.0), else the newest that pip can install on this Python;
#   - onnxruntime in the same venv, optional (bench/run_onnx.sh; below).
# numpy is held below 2 in the venv when TensorFlow allows it: Debian's torch 1.13 was built
# against numpy 1.x and fails to import beside numpy 2 (run_cnn.sh runs torch under Debian's
# own /usr/bin/python3 all the same). Safe to run twice: what is there is kept. The last
# line says what is installed:  peers torch=... tensorflow=... numpy_venv=... python=...
#
#   bench/peers-setup.sh            TF_VERSION=2.20.0 bench/peers-setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TF_VERSION=${TF_VERSION:-2.21.0}
VENV=bench/.venv
SYS_PYTHON=/usr/bin/python3

if ! "$SYS_PYTHON" -c 'import torch' 2>/dev/null; then
    if [ "$(id -u)" != 0 ]; then
        echo "peers-setup.sh: $SYS_PYTHON cannot import torch and this is not root:" \
             "install Debian's python3-torch (apt-get install python3-torch) and run again" >&2
        exit 1
    fi
    # the package lists may be missing or stale on a fresh machine
    apt-cache show python3-torch >/dev/null 2>&1 || apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch
fi
"$SYS_PYTHON" -c 'import ensurepip' 2>/dev/null || {
    echo "peers-setup.sh: $SYS_PYTHON has no venv support: apt-get install python3-venv" >&2
    exit 1
}

[ -x "$VENV/bin/python" ] || "$SYS_PYTHON" -m venv --system-site-packages "$VENV"
PY="$VENV/bin/python"

# tensorflow-cpu: the wanted version with numpy < 2, then without the numpy bound, then the
# newest that installs; an installed TensorFlow of the wanted version is kept as it is.
have_tf=$("$PY" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))' \
          2>/dev/null || true)
if [ "$have_tf" != "$TF_VERSION" ]; then
    "$PY" -m pip install -q --upgrade pip >/dev/null || true
    "$PY" -m pip install -q "tensorflow-cpu==$TF_VERSION" "numpy<2" \
        || "$PY" -m pip install -q "tensorflow-cpu==$TF_VERSION" \
        || { echo "peers-setup.sh: tensorflow-cpu $TF_VERSION does not install here;" \
                  "trying the newest that does" >&2
             "$PY" -m pip install -q tensorflow-cpu; }
fi

# onnxruntime (bench/onnx_vs_ort.py, bench/run_onnx.sh), an optional extra: ORT_VERSION
# (default 1.32.0), else the newest that installs; ORT=0 skips it; a failure is reported and
# does not stop the CNN peers.
ORT_VERSION=${ORT_VERSION:-1.32.0}
if [ "${ORT:-1}" != 0 ] && ! "$PY" -c 'import onnxruntime' 2>/dev/null; then
    "$PY" -m pip install -q "onnxruntime==$ORT_VERSION" || "$PY" -m pip install -q onnxruntime \
        || echo "peers-setup.sh: onnxruntime does not install here (bench/run_onnx.sh needs it)" >&2
fi

# both peers must import where run_cnn.sh runs them
"$SYS_PYTHON" -c 'import torch' || { echo "peers-setup.sh: torch does not import" >&2; exit 1; }
TF_CPP_MIN_LOG_LEVEL=2 "$PY" -c 'import tensorflow' \
    || { echo "peers-setup.sh: tensorflow does not import in $VENV" >&2; exit 1; }
torch_in_venv=$("$PY" -c 'import torch; print("yes")' 2>/dev/null || echo "no")
echo "peers torch=$("$SYS_PYTHON" -c 'import torch; print(torch.__version__)')" \
     "tensorflow=$(TF_CPP_MIN_LOG_LEVEL=2 "$PY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)" \
     "numpy_venv=$("$PY" -c 'import numpy; print(numpy.__version__)')" \
     "numpy_system=$("$SYS_PYTHON" -c 'import numpy; print(numpy.__version__)')" \
     "torch_imports_in_venv=$torch_in_venv" \
     "onnxruntime=$("$PY" -c 'import onnxruntime; print(onnxruntime.__version__)' 2>/dev/null || echo none)" \
     "python=$("$PY" -c 'import sys; print(sys.version.split()[0])')"
