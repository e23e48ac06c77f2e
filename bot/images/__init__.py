"""The image stage: build, reuse and verify the pinned collector image; collect inside it.

- `pinning.py`: every image reference in the manifest, Dockerfiles and workflows is pinned.
- `context.py`: the build context and its content hash (pure).
- `engine.py`: the connection to the Docker engine.
- `build.py`: build, reuse (`ensure`) and push, with a progress display.
- `verify.py`: run the image's version probe and compare it with the manifest.
- `container.py`: `collectbot collect --image`: the collector in a locked-down container.
- `output.py`: take the container's output folder back as hostile (regular files only).
- `recover.py`: finalise a record from its checkpoint after the container died.
- `trust.py`: trust levels (trusted baseline jobs, untrusted pull request jobs).
"""
