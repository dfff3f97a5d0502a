-- Income poverty 2013 (% of people, RM), one row per line of the headerless file.
{{ stage_headerless_covariate(source('covariates', 'income_poverty_2013_rm')) }}
