"""The module extension behind MODULE.bazel (bzlmod, Bazel 6+; not tested here).

    heaptype = use_extension("@heaptype//:extensions.bzl", "heaptype")
    heaptype.install(python = "/path/to/venv/bin/python")    # optional
"""

load("//:repositories.bzl", "heaptype_install_repository", "heaptype_toolchain_repository")

def _heaptype_impl(module_ctx):
    python = "python3"
    for module in module_ctx.modules:
        for tag in module.tags.install:
            python = tag.python
    heaptype_install_repository(name = "heaptype_install", python = python)
    heaptype_toolchain_repository(name = "heaptype_toolchain")

heaptype = module_extension(
    implementation = _heaptype_impl,
    tag_classes = {
        "install": tag_class(attrs = {"python": attr.string(default = "python3")}),
    },
)
