"""mkdocs-gen-files script: writes the generated pages (docs/gen/render.py) into the site and fills the
`<!-- generated: ... -->` blocks of the hand-written pages."""

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
import render  # noqa: E402

for path, text in render.generated_pages().items():
    with mkdocs_gen_files.open(path, "w") as f:
        f.write(text)

for page in sorted(render.ROOT.joinpath("docs").glob("*.md")):
    text = page.read_text()
    if render.MARKER.search(text):
        with mkdocs_gen_files.open(page.name, "w") as f:
            f.write(render.fill_markers(text))

# The cost-at-scale figure lives with its benchmark (benchmarks/results), outside docs/.
with mkdocs_gen_files.open("img/scale.png", "wb") as f:
    f.write((render.ROOT / "benchmarks" / "results" / "scale.png").read_bytes())
