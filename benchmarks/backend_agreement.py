"""Translations on Keras backends side by side: the share that are identical (not a timing).

Each backend runs in a child process (``KERAS_BACKEND`` is read when Keras starts):
`Translator.from_preset` (or ``--model_dir``) translates the English verses of the Bible test
split, and each other backend's translations and scores are compared with the first's, verse by
verse. Every backend runs the one ``keras.ops`` search (`bahdanau_tf.decoding.search`: XLA on
TensorFlow, ``jax.jit`` on JAX, eager on PyTorch, with the same refilled slots), so a difference
can only come from the float order of the backends' kernels: the table gives, for the verses
that differ, the gap between the two backends' scores of their own best translations (a near-tie
that rounding flips is a gap near 0). The time of each child (compilations included) is
printed too, for orientation only. PyTorch needs an interpreter where it is installed (the
``backends`` extra): run the script with that interpreter, the children use it too.

    python benchmarks/backend_agreement.py [--backends=tensorflow,jax,torch] [--beam_sizes=5,1]
        [--model_dir=bible-en-es-small] [--sentences=0 (all)] [--timeout=3600 (seconds per backend)]
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machines  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", "bible-en-es-small", "A model directory or a shipped model's name.")
flags.DEFINE_list("backends", ["tensorflow", "jax"], "Keras backends; the first is the reference.")
flags.DEFINE_list("beam_sizes", ["5", "1"], "Beam sizes (1 = greedy).")
flags.DEFINE_integer("sentences", 0, "Test verses to translate (0: all).")
flags.DEFINE_integer("timeout", 3600, "Seconds each backend's child may run (PyTorch's eager search is slow).")
flags.DEFINE_bool("child", False, "Internal: translate in this process.")
flags.DEFINE_string("output", os.path.join(os.path.dirname(__file__), "results", "backend_agreement.json"),
                    "Where the JSON goes.")


def child():
    """Translates the test verses on this process's backend; prints one JSON line."""
    import keras

    from bahdanau_tf.corpora import load_corpus
    from bahdanau_tf.translator import Translator

    verses = list(load_corpus("bible-en-es", split="test").sources)
    verses = verses[:FLAGS.sentences] if FLAGS.sentences else verses
    translator = Translator.from_directory(FLAGS.model_dir)
    results = {}
    for beam_size in FLAGS.beam_sizes:
        start = time.perf_counter()
        output = translator.translate(verses, beam_size=int(beam_size))
        results[beam_size] = {"seconds": time.perf_counter() - start, "translations": output.translations,
                              "scores": [float(s) for s in output.scores]}
    print(json.dumps({"backend": keras.backend.backend(), "beams": results}))


def compare(reference, other) -> dict:
    """The share of identical translations and, for the others, the score gaps."""
    pairs = list(zip(reference["translations"], other["translations"],
                     reference["scores"], other["scores"]))
    same = [abs(a - b) for t, u, a, b in pairs if t == u]
    gaps = sorted(abs(a - b) for t, u, a, b in pairs if t != u)
    return {"sentences": len(pairs), "identical": len(same), "identical_share": len(same) / max(len(pairs), 1),
            "max_score_difference_identical": max(same, default=0.0), "score_gaps_of_the_others": gaps}


def main(argv):
    del argv
    if FLAGS.child:
        return child()
    arguments = [f"--model_dir={FLAGS.model_dir}", f"--beam_sizes={','.join(FLAGS.beam_sizes)}",
                 f"--sentences={FLAGS.sentences}", "--child"]
    results = [_machines.run_child(__file__, arguments, "native", timeout=FLAGS.timeout,
                                   extra_environment={"KERAS_BACKEND": backend})
               for backend in FLAGS.backends]
    summaries = {}
    for beam_size in FLAGS.beam_sizes:
        reference = results[0]["beams"][beam_size]
        summary = summaries[beam_size] = {
            "seconds": {result["backend"]: result["beams"][beam_size]["seconds"] for result in results}}
        for result in results[1:]:
            agreement = summary[result["backend"]] = compare(reference, result["beams"][beam_size])
            print(f"{FLAGS.model_dir}, beam {beam_size}, {agreement['sentences']} test verses, "
                  f"{results[0]['backend']} / {result['backend']}: {agreement['identical']} identical "
                  f"({100 * agreement['identical_share']:.2f}%), largest score difference among them "
                  f"{agreement['max_score_difference_identical']:.2e}; score gaps of the others: "
                  f"{[f'{g:.2e}' for g in agreement['score_gaps_of_the_others']]}")
        print(f"seconds (compilations included): {summary['seconds']}")
    from bahdanau_tf import devices

    _machines.write_json(FLAGS.output, {"machine": devices.benchmark_record(), "model": FLAGS.model_dir,
                                        "backends": FLAGS.backends, "beams": summaries})


if __name__ == "__main__":
    app.run(main)
