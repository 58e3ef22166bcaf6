"""The id convention shared by every tokenizer, model, decoder and export.

Both languages use the same four reserved ids at the start of their vocabularies:

=====  ===========  =====================================================
id     token        meaning
=====  ===========  =====================================================
0      ``[PAD]``    padding; masked out of the encoder, attention and loss
1      ``[START]``  y_0, the first decoder input
2      ``[END]``    ends every source sentence and every translation
3      ``[UNK]``    any word outside the vocabulary (word-level shortlist)
=====  ===========  =====================================================

This module is the only place these numbers are written down.
"""

PAD_ID = 0
START_ID = 1
END_ID = 2
UNK_ID = 3

PAD_TOKEN = "[PAD]"
START_TOKEN = "[START]"
END_TOKEN = "[END]"
UNK_TOKEN = "[UNK]"

SPECIAL_TOKENS = (PAD_TOKEN, START_TOKEN, END_TOKEN, UNK_TOKEN)
NUM_SPECIAL_TOKENS = len(SPECIAL_TOKENS)
