"""bahdanau_tf: RNNsearch (Bahdanau, Cho & Bengio, ICLR 2015) in TensorFlow 2 / Keras 3.

Example:

    from bahdanau_tf import RNNSearch
    model = RNNSearch.from_preset("small", source_vocabulary_size=8000,
                                  target_vocabulary_size=8000)
"""

__version__ = "0.1.0"

from bahdanau_tf import special_tokens
from bahdanau_tf.layers import (
    AttentionGRUCell,
    BahdanauAttention,
    BidirectionalEncoder,
    ConditionalGRUCell,
    MaxoutReadout,
)
from bahdanau_tf.losses import MaskedAccuracy, MaskedSparseCategoricalCrossentropy
from bahdanau_tf.models import RNNEncDec, RNNSearch, Seq2Seq, model_from_preset
from bahdanau_tf.training import Trainer, TrainingConfig
from bahdanau_tf import evaluation
from bahdanau_tf.translator import Translator
from bahdanau_tf.serving import export_saved_model, load_exported
from bahdanau_tf.decoding import beam_search, ensemble_step_fn, greedy_search, tile_beams
from bahdanau_tf.text import SubwordTokenizer, WordTokenizer, load_tokenizer, split_words
from bahdanau_tf.data import (
    ParallelCorpus,
    load_corpus,
    load_parallel_files,
    load_tfds,
    load_tsv,
    make_dataset,
)
