"""Reference implementations written from ``docs/method.md``, for tests.

Each function restates one formula of ``docs/method.md`` in a few lines of
plain torch, independently of the library's (optimised) code, so tests
compare the library against the stated method rather than against itself.
"""
import torch

__all__ = ['spec_lazy_strike']


def spec_lazy_strike(tokens: torch.Tensor, k: int = 1) -> torch.Tensor:
    """LazyStrike as ``docs/method.md#lazystrike`` states it (public-code
    defaults: ``window='code'``, ``score='code'``).

    Args:
        tokens: Patch tokens ``(B, N, C)``.
        k: Patches kept per channel.

    Returns:
        The pooled ``(B, C)`` token.
    """
    d = tokens.shape[-1]
    pos = torch.arange(-d // 2 + 1, d // 2 + 1, dtype=torch.float32)
    g = torch.exp(-0.5 * (pos / d**0.5)**2)
    g = g / g.max()
    freq = torch.fft.fftshift(torch.fft.fft(tokens, dim=-1), dim=-1)
    x_hat = torch.fft.ifft(torch.fft.ifftshift(freq * g, dim=-1), dim=-1).real
    score = tokens / (x_hat - tokens).abs()
    index = score.argsort(dim=1, descending=True)[:, :k]
    return torch.gather(tokens, 1, index).mean(1)
