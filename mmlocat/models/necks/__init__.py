from .patch_score_neck import PatchScoreNeck

__all__ = ['PatchScoreNeck']
