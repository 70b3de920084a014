# mmlocat's runtime, declared (README "The runtime"): the Runner it names
# adds RNGStateHook, PreemptionHook, WeightsOnlyCheckpointHook and
# RecordHook, makes checkpoint writes atomic, epoch loops
# resumable mid-epoch, a resume take its checkpoint's seed, and checks data
# files as they load (options: `checked_dataset = dict(on_error=...)`).
# The hosts' own tools/train.py build it too (mmseg 1.2.2's test.py builds a
# plain Runner, which reads these checkpoints all the same). A config of your
# own gets it all with this one line (plus mmlocat in custom_imports).
runner_type = 'mmlocat.MMLocatRunner'
