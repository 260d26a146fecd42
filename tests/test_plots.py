"""Pictures of a factorization: the figure's axes and images, files written, the missing extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bmfdsl import factorize, make_exact_rank, plot_factorization, plot_factors
from bmfdsl.apps import main
from bmfdsl.errors import BackendUnavailableError, InvalidParameterError
from bmfdsl.result import Factorization

pytest.importorskip("matplotlib", reason="the pictures need the plot extra (matplotlib)")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def planted():
    A = make_exact_rank(24, 18, 3, random_state=3).astype(np.int64)
    A[0, 0] = 1 - A[0, 0]  # one wrong cell: the residual is not all white
    return A, factorize(A, 3, random_state=0)


def images_by_title(figure):
    return {axis.get_title(): axis.get_images() for axis in figure.axes}


def codes(F):
    """Each row of a 0/1 factor as an integer, component 0 the most significant bit."""
    return F.astype(np.int64) @ (2 ** np.arange(F.shape[1])[::-1])


def test_the_figure_shows_a_product_and_residual_ordered_by_the_factor_codes(planted):
    A, result = planted
    figure = result.plot(A)
    images = images_by_title(figure)
    assert list(images) == ["Vᵀ", "U", "A", "U Vᵀ", "A − U Vᵀ"]
    assert all(len(found) == 1 for found in images.values())
    shown_A = np.ma.getdata(images["A"][0].get_array())
    shown_product = np.asarray(images["U Vᵀ"][0].get_array())
    shown_residual = np.ma.getdata(images["A − U Vᵀ"][0].get_array())
    # the panels hold A, UVᵀ and A - UVᵀ, rows and columns permuted alike
    product = result.reconstruct()
    for axis in (0, 1):
        assert sorted(shown_A.sum(axis=axis)) == sorted(A.sum(axis=axis))
        assert sorted((shown_A - shown_residual).sum(axis=axis)) == sorted(product.sum(axis=axis))
    assert shown_residual.sum() == (A - product).sum()
    assert np.abs(shown_residual).sum() == np.abs(A - product).sum() == result.error
    assert shown_product.sum() == np.minimum(product, 1).sum()
    # rows sorted by their code in U (descending), columns by theirs in V
    row_codes = codes(result.U)
    strip = np.asarray(images["U"][0].get_array())  # RGB: white where a factor entry is 0
    strip_codes = codes((strip < 0.99).any(axis=2))
    assert sorted(strip_codes.tolist(), reverse=True) == strip_codes.tolist()
    assert sorted(strip_codes.tolist()) == sorted(row_codes.tolist())
    top = np.asarray(images["Vᵀ"][0].get_array())  # r x n x 3
    column_codes = codes((top < 0.99).any(axis=2).T)
    assert sorted(column_codes.tolist(), reverse=True) == column_codes.tolist()
    assert "error" in figure.get_suptitle()


def test_without_A_only_the_product_and_factors_are_drawn(planted):
    _, result = planted
    titles = [axis.get_title() for axis in plot_factorization(result).axes]
    assert titles == ["Vᵀ", "U", "U Vᵀ"]


def test_missing_cells_are_masked_in_A_and_the_residual(planted):
    A, result = planted
    with_missing = A.astype(np.float64)
    with_missing[2, 3] = np.nan
    images = images_by_title(plot_factorization(result, with_missing, order=False))
    for title in ("A", "A − U Vᵀ"):
        shown = images[title][0].get_array()
        assert np.ma.getmaskarray(shown).sum() == 1 and shown.mask[2, 3]


def test_a_matrix_of_another_shape_is_refused(planted):
    _, result = planted
    with pytest.raises(InvalidParameterError, match="pass the matrix that was factorized"):
        result.plot(np.zeros((3, 3)))


def test_plot_factors_draws_each_component_as_an_image():
    V = np.zeros((12, 3), dtype=np.int8)
    V[:4, 0] = V[4:8, 1] = V[8:, 2] = 1
    U = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1]], dtype=np.int8)
    figure = plot_factors(Factorization(U, V, 0, 0.0), image_shape=(3, 4))
    assert [axis.get_title() for axis in figure.axes] == ["0 (2 rows)", "1 (1 rows)", "2 (1 rows)"]
    for k, axis in enumerate(figure.axes):
        image = np.asarray(axis.get_images()[0].get_array())
        assert image.shape == (3, 4) and np.array_equal(image.ravel(), V[:, k])
    with pytest.raises(InvalidParameterError, match="height \\* width = 12"):
        plot_factors(Factorization(U, V, 0, 0.0), image_shape=(28, 28))


def test_the_png_is_written(planted, tmp_path):
    A, result = planted
    path = tmp_path / "out.png"
    result.plot(A).savefig(path)
    assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 1000


def test_the_command_line_writes_the_pictures(tmp_path, capsys):
    images = np.zeros((6, 16), dtype=int)
    images[:3, :8] = images[3:, 8:] = 1
    data = tmp_path / "images.csv"
    np.savetxt(data, images, fmt="%d", delimiter=",")
    out = tmp_path / "picture.png"
    argv = ["factorize", str(data), "-r", "2", "--seed", "0", "--plot", str(out)]
    assert main([*argv, "--image-shape", "4x4"]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    factors = tmp_path / "picture-factors.png"
    assert factors.read_bytes()[:8] == PNG_MAGIC
    assert str(factors) in capsys.readouterr().out


def test_a_missing_matplotlib_names_the_extra(planted, monkeypatch):
    _, result = planted
    for name in [name for name in sys.modules if name.split(".")[0] == "matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # importing it now raises ImportError
    with pytest.raises(BackendUnavailableError, match=r"pip install 'bmfdsl\[plot\]'"):
        result.plot()
    with pytest.raises(BackendUnavailableError, match="bmfdsl\\[plot\\]"):
        plot_factors(result, image_shape=(3, 6))


def test_the_readme_figure_script_draws_its_picture(tmp_path):
    script = Path(__file__).resolve().parents[1] / "docs" / "figures" / "make_readme_figure.py"
    out = tmp_path / "factorization.png"
    result = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == PNG_MAGIC and 5_000 < out.stat().st_size < 100_000


def test_a_matrix_too_large_to_draw_is_refused_before_solving(tmp_path, monkeypatch, capsys):
    import bmfdsl.apps._plots as plots

    monkeypatch.setattr(plots, "MAX_PLOT_CELLS", 10)
    data = tmp_path / "A.csv"
    np.savetxt(data, make_exact_rank(6, 4, 2, random_state=0), fmt="%d", delimiter=",")
    out = tmp_path / "picture.png"
    assert main(["factorize", str(data), "-r", "2", "--plot", str(out)]) == 1
    assert "more than 10 to draw" in capsys.readouterr().err and not out.exists()
