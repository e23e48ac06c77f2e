# The bot's own image: the trusted side (plan, compare, render, publish). It reads run
# records and talks to GitHub and the Docker engine; it has no torch and no GPU stack (the
# collector's GPU stack lives in the pinned framework image, images/collector.Dockerfile).
#
#   docker build -t collectbot .            (needs a package index for the build stage)
#   docker run --rm collectbot compare ...
ARG BASE_IMAGE=python:3.12-slim-bookworm@sha256:782412e85d0f0984994c290652577d4018aff08145c85b262bb63dc0c7522254

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot/ bot/
COPY collector/ collector/
# The trusted side only: no [collector] extra, so no torch.
RUN python -m pip wheel --wheel-dir /wheels .

FROM ${BASE_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN python -m pip install --no-index --find-links /wheels collectbot \
    && rm -rf /wheels \
    && python -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is not None)"
USER 65534:65534
WORKDIR /work
ENTRYPOINT ["collectbot"]
CMD ["--help"]
