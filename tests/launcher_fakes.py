"""A stand-in for what ``fn[grid](...)`` returns on a GPU (a loaded CompiledKernel): its
launcher records each direct launch, or raises when ``fail`` is set. The launch-route tests
(tests/test_dyt_lean.py: CompiledLauncher; tests/test_specializing_launcher.py) share it."""


class FakeCompiled:
    name = "fake_kernel"

    def __init__(self, log):
        self.log, self.function, self.packed_metadata = log, object(), ("packed",)
        self.fail = False

    def run(self, *args):
        if self.fail:
            raise TypeError("launcher signature changed")
        self.log.append(("direct", args))

    def launch_metadata(self, grid, stream, *args):
        return {"grid": grid, "args": args}
