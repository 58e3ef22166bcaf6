"""bahdanau_tf: RNNsearch (Bahdanau, Cho & Bengio, ICLR 2015) in TensorFlow 2 / Keras 3."""

import pathlib

from setuptools import find_packages, setup

HERE = pathlib.Path(__file__).parent

# Where the repository is published: the publisher sets this line, and only this line. The Colab
# badges and links (README.md, colab/README.md) and the notebooks' install cells are generated
# from it by `python colab/_build_notebooks.py`; tests/test_notebooks.py fails when they drift.
REPOSITORY_URL = "https://github.com/OWNER/bahdanau_tf"

setup(
    name="bahdanau_tf",
    version="0.1.0",
    description=(
        "RNNsearch, the attention model of 'Neural Machine Translation by Jointly Learning to "
        "Align and Translate', in TensorFlow/Keras 3, with beam search inside the SavedModel."
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    url=REPOSITORY_URL,
    project_urls={"Source": REPOSITORY_URL,
                  "Colab notebooks": f"{REPOSITORY_URL}/tree/main/colab"},
    license="Apache-2.0",
    python_requires=">=3.10",
    # the serving kit, export/ in the repository, ships as bahdanau_tf/_serving_kit/ (what
    # bahdanau_tf.serving_kit writes out: the Colab notebooks use it from a wheel)
    packages=find_packages(include=["bahdanau_tf", "bahdanau_tf.*"]) + ["bahdanau_tf._serving_kit"],
    package_dir={"bahdanau_tf._serving_kit": "export"},
    include_package_data=True,
    package_data={"bahdanau_tf": ["corpora/*", "corpora/**/*", "py.typed"],
                  "bahdanau_tf._serving_kit": ["README.md", "models.config",
                                               "batching_parameters.txt"]},
    install_requires=[
        "tensorflow>=2.16",
        "tensorflow-text>=2.16",
        "keras>=3.3",
        "sacrebleu>=2.3",
        "absl-py>=1.4",
        "numpy>=1.24",
        "matplotlib>=3.7",
    ],
    extras_require={
        "test": [
            "pytest>=7.4",
            "pytest-xdist>=3.5",
            "tensorflow-serving-api>=2.16",
            "nbclient>=0.9",
            "nbconvert>=7",
            "nbformat>=5.9",
            "ipykernel>=6.25",
        ],
        "serving": ["tensorflow-serving-api>=2.16", "requests>=2.28"],
        "tensorboard": ["tensorboard>=2.16"],
    },
    entry_points={
        "console_scripts": [
            "bahdanau-data=bahdanau_tf.cli.data:run",
            "bahdanau-train=bahdanau_tf.cli.train:run",
            "bahdanau-translate=bahdanau_tf.cli.translate:run",
            "bahdanau-evaluate=bahdanau_tf.cli.evaluate:run",
            "bahdanau-export=bahdanau_tf.cli.export:run",
            "bahdanau-average=bahdanau_tf.cli.average:run",
        ]
    },
)
