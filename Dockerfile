# The bot's own image: the trusted side (plan, compare, render, publish) for GitHub-hosted
# jobs or users without Python. It has no torch and no GPU stack (the collector's GPU stack
# lives in the pinned framework image, images/collector.Dockerfile).
#
# Built offline from a folder of wheels, never from a package index:
#   python scripts/build_bot_image.py [--base-image REF] [--tag collectbot:VERSION]
#   docker run --rm collectbot:VERSION --version
ARG BASE_IMAGE=python:3.12-slim-bookworm@sha256:782412e85d0f0984994c290652577d4018aff08145c85b262bb63dc0c7522254

# Install into a folder of its own, so the wheels never reach a layer of the final image;
# test suites and C headers are dropped (nothing imports them).
FROM ${BASE_IMAGE} AS install
COPY wheels/ /wheels/
RUN python -m pip install --no-index --no-compile --disable-pip-version-check \
        --find-links /wheels --target /opt/collectbot collectbot \
    && python -c "import sys; sys.path.insert(0, '/opt/collectbot'); import importlib.util as u; sys.exit(u.find_spec('torch') is not None)" \
    && python -c "import pathlib, shutil; [shutil.rmtree(p, ignore_errors=True) for p in pathlib.Path('/opt/collectbot').rglob('*') if p.name in ('tests', '__pycache__') or p.match('pyarrow/include')]"

FROM ${BASE_IMAGE}
ENV PYTHONPATH=/opt/collectbot PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=install /opt/collectbot /opt/collectbot
USER 65534:65534
WORKDIR /tmp
ENTRYPOINT ["python", "-m", "bot"]
CMD ["--help"]
