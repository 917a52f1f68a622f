import numpy as np
import numpy.typing as npt

def signature(text: str, shingle_words: int, out: npt.NDArray[np.uint16], /) -> int: ...
