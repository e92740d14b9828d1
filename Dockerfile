# syntax=docker/dockerfile:1.7
#
# Image of the hook server: `python -m hooks serve` runs gunicorn.
#
#   docker build -t disaggregatedset-hooks:0.2.0 .
#   docker run --rm -p 8080:8080 --read-only --tmpfs /tmp disaggregatedset-hooks:0.2.0
#
# Two stages. The build stage turns the project and all its dependencies into
# wheels. The final stage installs only those wheels (no index, no compilers,
# no build tools, no source tree) into a venv and runs as a numeric non-root
# user. At runtime nothing is written outside /tmp, so the root filesystem can
# be read-only.
#
# Reproducible: the base image is pinned by digest, and the dependencies come
# from requirements.lock (exact versions with hashes, `pip install
# --require-hashes`), regenerated with pip-tools when pyproject.toml changes:
#   pip-compile --generate-hashes --strip-extras --allow-unsafe \
#       --no-emit-index-url --no-emit-find-links --output-file requirements.lock pyproject.toml
# Refresh the digest with `docker buildx imagetools inspect python:3.11-slim`.

ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# README.md is listed as the package's `readme` in pyproject.toml, so the
# build needs it.
COPY pyproject.toml README.md LICENSE requirements.lock ./
COPY hooks ./hooks
# Wheels for every locked dependency (each checked against its hash), then for
# the project itself without resolving anything again. All of them ship binary
# wheels for CPython 3.11 on Linux, so no compiler is involved; if one ever did
# not, this stage (and only this stage) would need build tools.
RUN python -m pip wheel --wheel-dir /wheels --require-hashes --no-deps -r requirements.lock \
 && python -m pip wheel --wheel-dir /wheels --no-deps .


FROM ${PYTHON_IMAGE}
ENV VIRTUAL_ENV=/opt/venv

# A named account for the numeric UID, so tools that look the user up (and
# people reading `ps`) see a name; the pod spec uses the number.
RUN groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin nonroot

# The wheels are bind-mounted from the build stage rather than copied, so they
# never become a layer of this image. The venv has no pip of its own: the base
# image's pip installs into it. pip compiles .pyc files at install time, which
# is why the read-only runtime never needs to write bytecode.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,from=build,source=/src/requirements.lock,target=/requirements.lock \
    python -m venv --without-pip "$VIRTUAL_ENV" \
 && python -m pip --python "$VIRTUAL_ENV/bin/python" install \
        --no-index --find-links /wheels --no-cache-dir --disable-pip-version-check \
        --require-hashes -r /requirements.lock \
 && python -m pip --python "$VIRTUAL_ENV/bin/python" install \
        --no-index --find-links /wheels --no-cache-dir --disable-pip-version-check \
        --no-deps disaggregatedset-hooks

# Runtime environment, set only now so that `python` above is still the base
# interpreter (the one with pip). PYTHONSAFEPATH keeps the working directory
# off sys.path, so `python -m hooks` only ever imports the installed package;
# TMPDIR is the one writable place (gunicorn heartbeats, Prometheus
# multiprocess files).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1 \
    TMPDIR=/tmp \
    HOME=/tmp

USER 65532:65532
WORKDIR /
EXPOSE 8080

ENTRYPOINT ["python", "-m", "hooks"]
# The CLI's own default bind is 127.0.0.1:8080; in a container it must listen
# on all interfaces.
CMD ["serve", "--bind", "0.0.0.0:8080"]
